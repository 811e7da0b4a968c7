import { newId } from './ids.ts';

export interface Card {
  brand: string;
  last4: string;
}

export type ChargeResult = { ok: true; reference: string } | { ok: false; message: string };

/** Where card charges go. The ledger records what a provider accepted; a decline moves no money. */
export interface PaymentProvider {
  readonly name: string;
  charge(request: { tenantId: string; card: Card; amountCents: number; description: string }): Promise<ChargeResult>;
}

/** The built-in provider: every charge succeeds except on a card ending 0002, the usual test card for a decline. */
export class LedgerPaymentProvider implements PaymentProvider {
  readonly name = 'ledger';
  async charge(request: { card: Card }): Promise<ChargeResult> {
    if (request.card.last4 === '0002') return { ok: false, message: 'the card was declined' };
    return { ok: true, reference: newId('ch') };
  }
}
