//! rozone-client (placeholder).
