-- escape: read a local file through the outbound HTTP client with a file:// URL.
-- where: fetch
-- expect: error url must be an http:// or https:// address
return http.get("file:///etc/passwd").body
