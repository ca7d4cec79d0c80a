"""The metrics of real gateway processes, scraped over HTTP."""
