object "Counter" { get = function(self) return 1 end }
