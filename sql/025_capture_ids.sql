-- A capture may carry its own id (an Adyen capture's psp reference, a Checkout.com
-- capture's action id) in `refund_id`, the movement's own id: a second partial capture
-- of one payment then differs from the first and is parked as a collision, never
-- acknowledged as its repeat. Every other kind still needs one. Idempotent.
ALTER TABLE settlements DROP CONSTRAINT IF EXISTS settlements_refund_has_id;
ALTER TABLE settlements ADD CONSTRAINT settlements_refund_has_id
    CHECK (kind = 'capture' OR refund_id IS NOT NULL);
