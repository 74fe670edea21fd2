// Anchors the shared precompiled torch header (see cmake/harness.cmake).
