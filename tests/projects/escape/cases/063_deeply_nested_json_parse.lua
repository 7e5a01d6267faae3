-- escape: json.parse a document nested a hundred thousand deep.
-- where: fetch
-- expect: error json.parse:
return json.parse(string.rep("[", 100000) .. string.rep("]", 100000))
