"""Braintree: its webhook notifications (`webhooks`) and their signed XML payload, read
as its library reads it (`payload`)."""
