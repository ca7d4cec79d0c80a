"""The ledger with TigerBeetle's semantics: the port (`port`), its posting rules (`rules`),
deterministic ids and the platform's accounts (`ids`), whose each account is (`accounts`),
and requests cut to a backend's limit (`batches`)."""
