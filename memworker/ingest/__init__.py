"""The write path: episodes accepted (intake, API side) and processed into memories
(processing, worker side)."""
