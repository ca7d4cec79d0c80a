"""`gateway forward`, decided: which events a destination receives (`filters`), the request
sent for one (`request`), the verdict and delay after each attempt (`retry`), and which
addresses a target may resolve to (`addresses`)."""
