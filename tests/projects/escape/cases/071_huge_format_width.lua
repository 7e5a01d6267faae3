-- escape: ask string.format for a field a hundred million characters wide.
-- where: step
-- expect: error invalid conversion
return string.format("%099999999d", 1)
