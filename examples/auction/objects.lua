-- The auction's objects. Each key's state persists after every call, and calls to one key
-- are serialized, so these methods read and write self.state without locks.

object "Account" {
    notify = function(self, kind, fields)
        local sent = self.state.sent or {}
        sent[#sent + 1] = { kind = kind, fields = fields }
        self.state.sent = sent
        log.info("notify " .. self.key, { kind = kind, fields = fields })
    end,
    notifications = function(self)
        return self.state.sent or {}
    end,
}

object "Payments" {
    -- `key` identifies the effect (a step id); a charge repeated with the same key is
    -- recognised and returns the first receipt instead of charging again.
    charge = function(self, amount, key)
        local charges = self.state.charges or {}
        local existing = charges[key]
        if existing then
            existing.repeats = existing.repeats + 1
            self.state.charges = charges
            return existing
        end
        local receipt = { id = "rcpt-" .. crypto.hex(crypto.sha256(key)):sub(1, 12), amount = amount, key = key, repeats = 0 }
        charges[key] = receipt
        self.state.charges = charges
        return receipt
    end,
    -- Gives a charge back (once: a refund repeated after a crash finds it refunded).
    refund = function(self, key)
        local charges = self.state.charges or {}
        local charge = charges[key]
        if not charge then error("no charge " .. tostring(key) .. " to refund", 0) end
        charge.refunded = true
        self.state.charges = charges
        return charge
    end,
    ledger = function(self)
        return self.state.charges or {}
    end,
}

object "Registrar" {
    sign = function(self, payload)
        return crypto.hex(crypto.hmac_sha256("registrar:" .. self.key, json.encode(payload)))
    end,
}
