"""The DB-API errors an archive's connection raises, as one name each.

`except dbapi.Error` (a tuple) is what code outside chatdb/connection.py
catches, so that a change of driver for some archives changes nothing there.
"""

import sqlite3

Error = (sqlite3.Error,)
DatabaseError = (sqlite3.DatabaseError,)
OperationalError = (sqlite3.OperationalError,)
