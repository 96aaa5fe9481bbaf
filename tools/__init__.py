"""Developer tools that are not part of the library (doc generators); run from the repository root."""
