"""PayPal's signature: the transmission signed with RSA (`scheme`), and the certificate
it is checked with, fetched and its chain verified (`chain`)."""
