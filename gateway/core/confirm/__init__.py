"""The confirm stage's pure decisions: what an API answer means for a fetch that confirms
a webhook, when to try again, and the events a confirmed answer becomes."""
