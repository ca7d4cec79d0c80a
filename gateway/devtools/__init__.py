"""Tools that are not production code: the documentation generated from the code
(`docs_reference`, `package_map`)."""
