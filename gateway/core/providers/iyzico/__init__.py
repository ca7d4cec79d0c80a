"""iyzico: its signed webhooks (`webhooks`) and the payment fetched to confirm them
(`answer`)."""
