"""String operators and TfIdfVectorizer."""
