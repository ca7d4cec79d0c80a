"""The SQL of order per key (sql/014): numbering at ingest (`key_numbers`), how a key moves
(`key_moves`), settlement's side of it (`applied`), the operator's view (`admin`) and
retention's key pass (`retention`)."""
