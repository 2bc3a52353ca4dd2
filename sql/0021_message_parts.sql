-- A long message is stored as consecutive parts (memworker/episodic.py); each part now
-- says how many its message has, so recall can weigh a message of n parts, which has n
-- chances at the vector signal, as one message (docs/episodes.md, "Long messages"). Only a
-- message's first part carries its postings: the message is one document to BM25. Rows
-- written before keep 1 (and the postings they have).
ALTER TABLE memworker.memories ADD COLUMN parts integer NOT NULL DEFAULT 1;
ALTER TABLE memworker.memories ADD CONSTRAINT memories_parts_check CHECK (parts >= 1);
