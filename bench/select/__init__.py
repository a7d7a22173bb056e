"""Source selection measurements: profile + select over the shared sources (`profile_sources`)."""
