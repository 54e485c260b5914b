"""Release records, crypto, verification and stores. Pure data and crypto: imports no other folder."""
