"""Dead letters as operators see them: the row (`model`), what an operator asked for
(`filters`), the list's pages and derived columns (`pages`, `columns`), one letter's page
(`view`), and which open rows are due for an automatic re-drive (`auto_replay`)."""
