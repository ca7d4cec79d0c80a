"""`gateway backfill`, decided: the window, what a listing API answered and how long to
wait (`decisions`), and the checks of one entry of a provider's event listing (`items`)."""
