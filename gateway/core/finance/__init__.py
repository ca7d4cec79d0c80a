"""Merchants' money as finance reads it: statements and transfer lists (`statements`), the
console's ledger pages (`view`), what an operator types into them (`input`), and a
correcting entry (`adjustment_form`)."""
