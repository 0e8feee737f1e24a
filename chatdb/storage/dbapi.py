"""The DB-API errors an archive's connection raises, as one name each.

A plain archive is opened with Python's sqlite3, an encrypted one with sqlcipher3
(SQLCipher's build of SQLite): two modules, two sets of exception classes.
`except dbapi.Error` (a tuple) catches either; code that catches SQLite's
errors from an archive's connection catches them so.
"""

import sqlite3

from sqlcipher3 import dbapi2 as sqlcipher

Error = (sqlite3.Error, sqlcipher.Error)
DatabaseError = (sqlite3.DatabaseError, sqlcipher.DatabaseError)
OperationalError = (sqlite3.OperationalError, sqlcipher.OperationalError)
ProgrammingError = (sqlite3.ProgrammingError, sqlcipher.ProgrammingError)
Warning = (sqlite3.Warning, sqlcipher.Warning)
