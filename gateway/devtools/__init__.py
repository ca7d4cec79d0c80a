"""Demo and test tools that are not production code (the stand-in currency-service)."""
