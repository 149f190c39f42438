// Keys of the test configuration (vitest.config.ts sets them; the tests check what the Worker
// derives from them).
export const TEST_TOKEN = "test-token";
// base64 ed25519 seed; its public key is PUBLIC_KEY.
export const TEST_SIGNING_KEY = "5z7vZBjBsbLghijgJ/im4yg8fSsSsZH08B+jTERzFs0=";
export const PUBLIC_KEY = "A7uEkRVTltb5Gdqhsb0Piu0KMJI4LOoKdIdcjruHpUs=";
// A retired key's public half (PREVIOUS_PUBLIC_KEYS: listed at /v1/public-key beside the current one).
export const RETIRED_PUBLIC_KEY = "O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=";
