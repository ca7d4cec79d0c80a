"""Money movements, decided: what an event asks the ledger to do and the ids it uses
(`instructions`), authorisations and captures (`two_phase`), and what a refund, a
chargeback or their reversal moves (`follow_ups`)."""
