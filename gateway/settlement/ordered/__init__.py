"""The ordering gate of the settlement worker: a fetched batch's keyed messages settled in
their keys' order (`gate`), one round of it (`round`), its answers (`answers`) and its
waiting room (`holding`)."""
