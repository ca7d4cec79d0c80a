"""One module per external system; each translates its library's errors at the edge."""
