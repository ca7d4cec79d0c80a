"""Mollie: its classic webhooks, confirmed by a fetch of the payment (`classic`, with the
answer read by `answer`), and its next-gen signed webhooks (`events`)."""
