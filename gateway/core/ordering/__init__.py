"""Order per key: what an event's key is (`keys`), settlement's gate over a batch's keyed
messages (`gate`), and what the operator sees of a key and its release (`admin`)."""
