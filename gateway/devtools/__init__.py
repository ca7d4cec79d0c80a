"""Tools that are not production code: the stand-in currency-service (`currency_stub`),
and the documentation generated from the code (`docs_reference`, `package_map`)."""
