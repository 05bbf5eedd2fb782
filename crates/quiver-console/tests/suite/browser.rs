//! Browser tests (filled in below).
