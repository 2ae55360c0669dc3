//! Tests of the checkpoint store.
