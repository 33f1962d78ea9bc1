"""A Keras training script with no hook code (zero script change). Usage: plain_fit.py EPOCHS [own-hook]"""

import sys

import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.normal(size=(64, 6)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="binary_crossentropy", metrics=["accuracy"])
callbacks = []
if len(sys.argv) > 2 and sys.argv[2] == "own-hook":  # the script asks for the hook too: still one hook
    from sdk_ext.keras import KerasHook

    callbacks.append(KerasHook.create_from_json_file())
model.fit(x, y, batch_size=16, epochs=int(sys.argv[1]), verbose=0, validation_split=0.25, callbacks=callbacks)
model.evaluate(x, y, batch_size=32, verbose=0)
print("done")
