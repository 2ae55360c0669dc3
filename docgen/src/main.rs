//! Writes the generated files (`docs/contracts/`, the man pages and shell completions) from the
//! code.

fn main() {}
