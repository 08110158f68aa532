"""One command's logic each."""
