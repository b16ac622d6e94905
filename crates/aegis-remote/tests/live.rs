//! Placeholder until the live server test lands.
