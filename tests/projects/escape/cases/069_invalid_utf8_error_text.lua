-- escape: fail with an error message of raw bytes that are not UTF-8, so the host chokes
-- decoding it.
-- where: fetch
-- expect: error ?? not utf-8
error("\255\254 not utf-8", 0)
