-- What forward passes cost on one machine with one engine configuration:
-- fitted from a brief measurement at first use and refined from the timings
-- of real turns; the draft policy sizes its guesses from it. `model` is the
-- engine's own JSON (coefficients and timing bins); the archive does not read it.
CREATE TABLE cost_models (
    engine     TEXT NOT NULL,      -- model file and KV configuration fingerprint, and offload
    machine    TEXT NOT NULL,      -- CPU, devices and llama.cpp build
    threads    INTEGER NOT NULL,   -- decode threads the timings were taken with
    model      TEXT NOT NULL,
    turns      INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (engine, machine, threads)
) WITHOUT ROWID;
