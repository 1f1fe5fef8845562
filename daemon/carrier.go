package daemon

// setCarrier puts a port's carrier on its TAP: on while the port passes traffic (queues attached,
// administratively up), off while it is down or detached (between a reconfiguration's detach and
// attach, and while a reset is pending or failing), so the stack in the namespace sees the link
// go down as it would on a NIC whose driver called netif_carrier_off. It is vnic's OnCarrier
// hook and runs with the configuration lock held. A TAP that cannot take it (closed meanwhile)
// is logged, never fatal: the carrier only informs the stack.
func (d *Daemon) setCarrier(p *port, on bool) {
	if p.dev == nil {
		return // the TAP is not open yet: syncCarrier sets it once it is
	}
	if !on && d.closing && !p.spec.Persistent {
		// Shutdown deletes the TAP next: taking its carrier down first would only make the
		// kernel withdraw the link's routes and addresses twice (with a thousand TAPs in a
		// namespace, a second of rtnl work), and the link is gone either way.
		return
	}
	if err := p.dev.SetCarrier(on); err != nil {
		d.log.Warn("setting the TAP's carrier failed", "port", p.spec.Name, "on", on, "err", err)
		return
	}
	d.log.Debug("carrier", "port", p.spec.Name, "on", on)
}

// syncCarrier sets the carrier from the port's current state: the kernel turns a TAP's carrier
// on when it is opened (or a persistent one re-attached), whatever the port does. Caller holds
// the configuration lock.
func (d *Daemon) syncCarrier(p *port) {
	d.setCarrier(p, p.vp.NumRxQueues() > 0)
}
