"""What a sender's body holds and how it is read: fields of parsed JSON (`fields`), JSON
pointers (`pointers`), form bodies (`forms`), and the rules for content that must be stored
and published safely (`content`)."""
