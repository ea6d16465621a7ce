"""annotation models arrive with their issue; the app is installed so migrations stay linear."""
