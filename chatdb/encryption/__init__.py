"""Encryption at rest (SQLCipher 4): the key and which files are encrypted (cipher),
opening an encrypted archive (unlocking), and encrypting, decrypting or rekeying one in
place (convert). Nothing is imported here: chatdb.storage.connection needs cipher and unlocking
while convert needs chatdb.storage.connection."""
