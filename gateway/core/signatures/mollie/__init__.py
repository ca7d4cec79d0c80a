"""Mollie's two kinds of webhook: the classic one, unsigned and confirmed by a fetch
(`classic`), and the next-gen one, signed over its body (`events`)."""
