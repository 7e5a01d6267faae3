"""Services behind the globals of SPEC section 2: databases, kv, objects, queues, and the
stateless helpers (http, crypto, Jwt).

``base.Services`` is what a platform needs from a set of services; ``local.LocalServices``
implements it on SQLite under the data folder. The AWS set arrives with the AWS runtime.
"""
