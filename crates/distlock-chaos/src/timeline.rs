//! The timeline of a run as an SVG: holds per process as bars, faults as shaded spans,
//! violations marked.
