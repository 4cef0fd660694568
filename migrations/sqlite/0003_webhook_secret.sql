-- Standard Webhooks signing: an endpoint may hold a signing secret (sealed with the gateway's
-- secret key, never shown); its jobs' webhook calls then carry webhook-signature headers.
ALTER TABLE endpoints ADD COLUMN webhook_secret TEXT;
